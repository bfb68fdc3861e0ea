from crosstalk.cli.main import main

main()
