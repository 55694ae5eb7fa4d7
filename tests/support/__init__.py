"""Helpers the tests share (plain functions and records); fixtures live in conftest.py files."""
