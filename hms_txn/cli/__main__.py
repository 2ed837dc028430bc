from hms_txn.cli.app import main

raise SystemExit(main())
