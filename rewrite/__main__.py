from warp_rewrite.cli import command

command()
