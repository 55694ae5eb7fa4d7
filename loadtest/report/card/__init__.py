"""The card, the report's first screen: what decides it and writes it (its rows, words, why none met, costs)."""
