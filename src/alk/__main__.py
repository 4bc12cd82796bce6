from alk.launch import main

main()
