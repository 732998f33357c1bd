grep -q hello hello.txt
