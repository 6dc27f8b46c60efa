"""The text job (`run --preset text`): language models trained here on a generated corpus with
canaries; LM membership attacks, secret exposure and extraction per target ε."""
