"""Scheduling policies: the Arena heuristic, classic baselines, and learned (SB3) agents."""
