"""`python -m hybridprof` runs the CLI."""

from hybridprof.cli import run_main

if __name__ == "__main__":
    run_main()
