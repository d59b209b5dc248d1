"""Card display scripts on the chat page: the shared matching lives with the cards
(:mod:`roleplay.assets.cards.regex_scripts`), where the Writer prompt's conversation uses it too."""

from roleplay.assets.cards.regex_scripts import RegexScripts as DisplayScripts
from roleplay.assets.cards.regex_scripts import display_scripts

__all__ = ["DisplayScripts", "display_scripts"]
