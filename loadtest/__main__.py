"""`python -m loadtest`: run a sweep plan against the running servers (see `loadtest.sweep.runner`)."""

from loadtest.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
