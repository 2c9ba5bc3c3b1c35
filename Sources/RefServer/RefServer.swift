import IMLink
