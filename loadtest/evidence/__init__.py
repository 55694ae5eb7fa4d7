"""Cell records, vocabularies, statistics and tables: what a load test measured, as data."""
