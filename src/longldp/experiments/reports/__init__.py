"""Reports of finished studies: tables and figures read from a results table, per kind.

The kinds (`longldp.experiments.kinds`) compute the rows; the modules here read them back:
`longldp.experiments.reports.multidim` ([004]'s gain tables), `.felip` (summary and paired
gaps) and `.setvalued` (the set-valued figures). `longldp.experiments.plot` draws the MSE
figures of every kind.
"""
