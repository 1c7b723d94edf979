"""What the tests and the benchmarks drive a real `litgpt serve` with: `litgpt_server` starts servers as subprocesses on
free ports and stops their process groups; `hostile_requests` holds the malformed and abusive requests, and what a
server must answer to each. Imported, not run; the commands a person runs are in `tools/`."""
