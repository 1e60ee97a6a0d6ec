from sizer.cli import main

main()
