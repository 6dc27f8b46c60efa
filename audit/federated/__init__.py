"""The federated job of `run`: FedAvg targets audited per record, per client and from the server's
seat, with ε accounted per level. Imports targets, attacks, statistics, machinery and reports only."""
