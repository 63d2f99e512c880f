"""What tests build kplane with: pods, clusters and components in a known state, and ways to wait."""
