"""One thread for torch in the learned-agent tests (the Tiny env setting is tests.rl_cases)."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
