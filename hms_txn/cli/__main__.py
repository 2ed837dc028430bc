from hms_txn.cli import main

raise SystemExit(main())
