from routerlab.cli import run

run()
