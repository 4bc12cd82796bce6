from alk.cli import main

main()
