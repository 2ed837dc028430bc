__all__ = ['ttypes', 'constants', 'FieldPresence', 'Hive2OpenTxns']
