"""`python -m audit.cli` (and `python -m audit`): the `privacy-audit` command."""

from audit.cli import main

main()
