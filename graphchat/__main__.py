from graphchat.cli.main import main

raise SystemExit(main())
