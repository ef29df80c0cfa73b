"""Results on a pull request: the `/spmi` command grammar, the GitHub REST client and the reply
comment (docs/pr_bot.md). Only `superpmi_pr_bot.py` imports this package."""
