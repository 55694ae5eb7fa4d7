"""Results read back: answers, the decision, sizing, figures and the report's pages."""
