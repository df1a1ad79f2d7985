from membound.cli import main

raise SystemExit(main())
