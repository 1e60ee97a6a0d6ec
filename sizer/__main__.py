from sizer.cli.app import main

main()
