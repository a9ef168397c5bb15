"""`python -m swarmlog`: the `swarmlog` program."""

from swarmlog.launch import main

main()
