"""Results read back, in rooms from the page down (pyproject.toml's import-linter contract keeps the order): the
page; the headline and glossary; the card and the sections; the charts; figures and shape sizing; sizing; the
answers; then the records' vocabulary (device use, host floor, configurations, blocks, formatting, series)."""
