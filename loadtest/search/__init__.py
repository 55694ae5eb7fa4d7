"""Choosing the next cell: capacity searches, paired comparisons, batching tuning."""
