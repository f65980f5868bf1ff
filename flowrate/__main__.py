from flowrate.cli import main

main()
