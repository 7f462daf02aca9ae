"""Tests of the learned agents (agents.rl)."""
