"""`python -m swarmlog`: the `swarmlog` program."""

from swarmlog.launch import main

if __name__ == "__main__":  # not when a child spawned by multiprocessing (vLLM's engine) imports it again
    main()
