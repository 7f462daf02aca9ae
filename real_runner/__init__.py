"""Live execution of policies on GPU testbeds (torch.distributed workers, launchers, live backend); not implemented yet: no open issue covers it."""
