delcounters a.b
