"""The commands a person runs from the repository's root, each as `python -m tools.<name>`: the real model and its
drafts (`smollm2`, `layer_draft`), the comparisons of two builds (`greedy_answers`, `replay_rounds`) and the tables the
docs show (`headline_table`, `vocabulary_table`). What the tests and the benchmarks import to drive a server is in
`harness/`."""
