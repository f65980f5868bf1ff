"""rubric."""
