"""What the results answer: each search's and device's answer, paired ratios and drift, sources, what bounded it."""
