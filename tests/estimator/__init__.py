"""Tests of the estimator package."""
