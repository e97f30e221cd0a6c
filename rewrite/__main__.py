from warp_rewrite.cli.main import command

command()
