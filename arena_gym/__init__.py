"""arena-gym package."""
