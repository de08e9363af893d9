"""Static benchmark subsets and their export."""
