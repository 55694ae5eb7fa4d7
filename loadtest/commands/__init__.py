"""The one command line, `mnist-bench`: a subcommand for every stage of the pipeline."""
