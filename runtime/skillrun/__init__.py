"""Running a plan's skills: the NDJSON protocol, plans, isolated skill processes, the executor, the zygote, and the sandbox and limits around them."""
