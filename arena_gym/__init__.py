"""arena-gym core: domain types, protocols, the simulator, the loop, metrics, results and the CLI."""
