"""Experiments: configurations → grids of runs → result tables → plots (DESIGN §7)."""
