"""flowrate where CI already is: the pytest plugin (`pytest_plugin`, registered by the `pytest11`
entry point, on `session`'s judging) and the GitHub Action's steps (`action`, which `action.yml`
runs). Consumers of `flowrate.api`, as the CLI is; nothing here is imported until used."""
