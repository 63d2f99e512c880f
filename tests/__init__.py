"""kplane tests: unit/, integration/ (real processes), scenarios/, chaos/."""
