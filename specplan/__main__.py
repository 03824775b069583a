"""`python -m specplan` runs the `specplan` command."""

from specplan.simulator.app.cli import main

raise SystemExit(main())
