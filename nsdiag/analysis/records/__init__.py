"""The analysis' records: what every analysis returns and every renderer reads.

Frozen dataclasses and their JSON only (docs/diagnosis.schema.json), no computation: no pandas
or numpy, and nothing above them in analysis/. A module that computes a result imports its
record from here; a module that reads one (render/, collect/, diff/) needs nothing else."""
